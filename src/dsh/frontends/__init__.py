"""Front ends: what drives agents from outside the process (the ACP daemon, the one-shot CLI)."""
