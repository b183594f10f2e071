"""Notices: session-level conditions any package posts (``session/notice``), front ends render (see ``README.md``)."""

from dsh.notices._notice import Fallback, Notice, Severity, post_notice

__all__ = ["Fallback", "Notice", "Severity", "post_notice"]
