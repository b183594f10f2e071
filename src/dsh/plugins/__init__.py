"""Plugins on the seams: behaviour beyond "call the model, run the tools, repeat"."""
