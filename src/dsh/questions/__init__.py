"""Questions to the user: the ``ask_user`` tool and the ``user/ask`` seam front ends answer (see ``README.md``)."""

from dsh.questions._plugin import ask, questions_plugin
from dsh.questions._types import Answer, Choice, Question

__all__ = ["Answer", "Choice", "Question", "ask", "questions_plugin"]
