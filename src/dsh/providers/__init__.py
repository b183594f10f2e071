"""Model providers: each module is a plugin that registers ``llm`` adapters."""
