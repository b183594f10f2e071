"""The terminal view: prompt_toolkit reads, rich draws (:mod:`dsh.chat._transcript`), ACP underneath.

Between turns a prompt_toolkit prompt owns the terminal (line editing, multi-line input, ``/`` and ``@``
completion, the status line below it). During a turn a rich live region at the bottom of the screen shows what
is still changing (the last lines of the reply, running tool cards with their output, the plan, a permission
question, the status line) while everything settled is printed once into the scrollback above it; the
terminal is in raw mode so that keys reach the chat, not the screen: Ctrl+C or Esc cancels the turn, and ``y``
/ ``a`` / ``n`` (or an option's number) answer a permission question.

Guarantees:

* The first prompt line appears before the agent has answered ``initialize``: start-up runs behind it, and a
  message typed early waits for the session. An agent that exits ends the chat (status 1, its stderr's tail).
* Ctrl+C or Esc during a turn sends ``session/cancel`` at once (a pending permission question is answered
  ``cancelled``); the prompt comes back when the agent answers the turn, or after :data:`CANCEL_GRACE`
  seconds if it does not (a second Esc stops waiting at once). A second Ctrl+C during a turn, or Ctrl+D during a
  turn, leaves the chat at once, whatever the agent does (it may flood output and ignore the cancel: the chat
  stops it on the way out). Ctrl+C on an empty prompt twice in a row, or Ctrl+D, exits; Ctrl+C on a non-empty prompt clears it. Esc closes the ``/`` menu (and every picker:
  :mod:`dsh.chat._picker`), and never exits.
* Shift+Tab sets the session's next mode (in the agent's order, round), at the prompt.
* During a turn, keys type a line above the status line (a permission question's keys answer it instead):
  Enter steers the running turn with it (``_dsh/session/steer``: it reaches the model at the next step; an
  agent that does not advertise it, or whose turn just ended, gets it as the next prompt), Tab queues it as the
  next prompt (sent when the turn ends). Nothing typed is lost: a cancel puts the queued lines, the line being
  typed and a steer the cancel dropped back on the prompt line, unsent (RFC 0036).
* ``!command`` runs the command in the user's shell, not through the agent (:mod:`dsh.chat._shell`): shown with
  its output and exit code, and sent as context with the next prompt (once); Ctrl+C or Esc stops it.
* A key typed into a ``/model`` or ``/mode`` picker that is not a choice closes it and starts the next prompt.
* Every permission request is shown with its card (the diff or the command) before the question, and is
  answered exactly once.
"""

from __future__ import annotations

import signal
from typing import TYPE_CHECKING, Any

import anyio
from rich.console import Console
from rich.text import Text

from dsh.chat._commands import LocalCommand, parse_local
from dsh.chat._mentions import prompt_blocks
from dsh.chat._options import ChatOptions
from dsh.chat._render import option_label, permission_keys
from dsh.chat._rpc import RpcError, describe
from dsh.chat._sanitize import clean, sanitize
from dsh.chat._shell import ShellRun, context_block, run_shell
from dsh.chat._terminals import Terminal
from dsh.chat._transcript import PROMPT_MARK, Transcript

if TYPE_CHECKING:
    from prompt_toolkit import PromptSession

    from dsh.chat._client import AcpClient

__all__ = ["CANCEL_GRACE", "TtyView"]

CANCEL_GRACE = 3.0


class TtyView:
    def __init__(self, options: ChatOptions) -> None:
        self.options = options
        self.console = Console(highlight=False)
        self._client: AcpClient | None = None
        self._session: PromptSession[str] | None = None
        self._ready = anyio.Event()
        self._failure: BaseException | None = None
        self._transcript: Transcript | None = None
        self._answer: tuple[dict[str, str], anyio.Event, list[str | None]] | None = None
        self._cancelling = False
        self._leaving = False
        """A second Ctrl+C or a Ctrl+D during a turn: the chat ends once the turn's scope is left."""
        self._turn_scope: anyio.CancelScope | None = None
        self._task_group: Any = None
        self._typed = ""
        """A key that closed a picker: the next prompt starts with it."""
        self._shell_runs: list[ShellRun] = []
        """``!command`` runs not yet sent: they go with the next prompt."""
        self._menu_mark = ""
        self._shell_scope: anyio.CancelScope | None = None
        self._queued: list[str] = []
        """Lines typed during a turn and queued with Tab: sent as prompts, in order, once the turn ends."""

    @property
    def client(self) -> AcpClient:
        assert self._client is not None
        return self._client

    @property
    def transcript(self) -> Transcript:
        assert self._transcript is not None
        return self._transcript

    # -- the session ------------------------------------------------------------------------------------------

    async def run(self, client: AcpClient, resume: bool) -> int:
        self._client = client
        self._transcript = Transcript(self.console, lambda: client.state, client.cwd)
        self._session = self._prompt_session()
        self.console.print(
            Text.assemble(
                ("dsh chat", "bold"),
                (
                    "  Enter sends · Alt+Enter new line · / commands · @ files · !cmd shell · Shift+Tab mode · "
                    "Esc stops · during a turn Enter steers, Tab queues · Ctrl+D exits",
                    "dim",
                ),
            )
        )
        # Ctrl+C is a key here: the prompt and the turn read it in raw mode. In the moment between two prompts
        # the terminal is in cooked mode and would turn it into SIGINT, killing the chat mid-way; ignored then
        # (by a handler that does nothing, not SIG_IGN, which the commands the chat starts would inherit).
        previous = signal.signal(signal.SIGINT, _ignore)
        try:
            code = await self._run(client, resume)
        finally:
            signal.signal(signal.SIGINT, previous)
        return code

    async def _run(self, client: AcpClient, resume: bool) -> int:
        failure: ConnectionError | RpcError | None = None
        code = 0
        async with anyio.create_task_group() as task_group:
            self._task_group = task_group
            task_group.start_soon(self._watch_agent)
            if resume:
                try:
                    resumed = await self._resume()
                except (ConnectionError, RpcError) as error:
                    failure, resumed = error, False
                if not resumed:
                    task_group.cancel_scope.cancel()
            else:
                task_group.start_soon(self._start)
                resumed = True
            try:
                if resumed:
                    code = await self._loop()
            except (ConnectionError, RpcError) as error:
                failure = error
            finally:
                task_group.cancel_scope.cancel()
        if failure is not None:
            raise failure  # outside the task group: run_chat sees it as it is, not in an exception group
        return code

    async def _start(self) -> None:
        try:
            await self.client.initialize()
            await self.client.new_session()
        except (ConnectionError, RpcError) as error:
            self._fail(error)
            return
        self._ready.set()
        self._invalidate()

    async def _watch_agent(self) -> None:
        await self.client.connection.closed.wait()
        self._fail(ConnectionError("the agent exited"))

    def _fail(self, error: BaseException) -> None:
        """The first failure wins; it ends a running turn or prompt, and :meth:`run` raises it."""
        if self._failure is not None:
            return
        self._failure = error
        self._ready.set()
        if self._turn_scope is not None:
            self._turn_scope.cancel()
        session = self._session
        if session is not None and session.app.is_running:
            try:
                session.app.exit(exception=error)
            except Exception:  # prompt_toolkit refuses a second exit: the prompt is already ending
                pass

    def _exit_if_failed(self) -> None:
        """Run as the prompt starts: a failure that came while it was starting (too early for :meth:`_fail` to
        end it) ends it now, instead of leaving a prompt that waits forever for a dead agent."""
        if self._failure is not None and self._session is not None:
            self._session.app.exit(exception=self._failure)

    async def _session_ready(self) -> None:
        await self._ready.wait()
        if self._failure is not None:
            raise self._failure

    async def _loop(self) -> int:
        assert self._session is not None
        armed = False
        while True:
            if self._failure is not None:
                raise self._failure
            if self._queued:  # typed during the last turn and queued with Tab: its turn comes now
                text = self._queued.pop(0)
                self.console.print(Text.assemble((PROMPT_MARK, "bold cyan"), (text, "")))
                await self._turn(text)
                if self._leaving:
                    return 0
                continue
            try:
                typed, self._typed = self._typed, ""
                text = await self._session.prompt_async(pre_run=self._exit_if_failed, default=typed)
            except KeyboardInterrupt:
                if armed:
                    return 0
                armed = True
                self.console.print(Text("Press Ctrl+C again to exit (or Ctrl+D).", style="dim"))
                continue
            except EOFError:
                return 0
            armed = False
            if not text.strip():
                continue
            if text.startswith("!") and text[1:].strip():
                await self._shell(text[1:].strip())
                continue
            await self._session_ready()
            local = parse_local(text.strip(), self.client.state)
            if local is not None:
                if local.name == "quit":
                    return 0
                await self._local(local)
                continue
            await self._turn(text)
            if self._leaving:
                return 0

    # -- input ------------------------------------------------------------------------------------------------

    def _prompt_session(self) -> PromptSession[str]:
        from prompt_toolkit import PromptSession
        from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
        from prompt_toolkit.styles import Style

        from dsh.chat._complete import ChatCompleter

        bindings = KeyBindings()

        @bindings.add("enter")
        def _(event: KeyPressEvent) -> None:
            buffer = event.current_buffer
            state = buffer.complete_state
            if state is not None and state.current_completion is not None:
                # the chosen completion is already in the text (prompt_toolkit inserts while choosing): Enter
                # accepts it and sends, except a directory, whose files come next
                completion = state.current_completion
                buffer.apply_completion(completion)
                if completion.text.endswith("/"):
                    return
            if buffer.document.text_before_cursor.endswith("\\"):
                buffer.delete_before_cursor()
                buffer.insert_text("\n")
                return
            buffer.validate_and_handle()

        @bindings.add("escape", "enter")
        @bindings.add("c-j")
        def _(event: KeyPressEvent) -> None:
            event.current_buffer.insert_text("\n")

        @bindings.add("c-c")
        def _(event: KeyPressEvent) -> None:
            if event.current_buffer.text:
                event.current_buffer.reset()
            else:
                event.app.exit(exception=KeyboardInterrupt())

        @bindings.add("escape")
        def _(event: KeyPressEvent) -> None:
            # closes the / and @ menus (the text stays as typed); never exits, never clears what was typed
            if event.current_buffer.complete_state is not None:
                event.current_buffer.cancel_completion()

        @bindings.add("s-tab")
        def _(event: KeyPressEvent) -> None:
            if self._ready.is_set() and self._failure is None:
                self._task_group.start_soon(self._next_mode)

        style = Style.from_dict({"bottom-toolbar": "noreverse #888888", "prompt": "bold ansicyan"})
        session: PromptSession[str] = PromptSession(
            message=[("class:prompt", PROMPT_MARK)],
            multiline=True,
            prompt_continuation="  ",
            key_bindings=bindings,
            completer=ChatCompleter(lambda: self.client.state, self.client.cwd),
            complete_while_typing=True,
            bottom_toolbar=self._toolbar,
            style=style,
            enable_history_search=False,
        )
        session.app.after_render += self._after_render
        return session

    def _after_render(self, app: Any) -> None:
        """The toolbar names what the completion menu hides; the menu is drawn after it, so when what it hides
        changed, one more frame brings the toolbar up to date."""
        mark = self._menu_hidden()
        if mark != self._menu_mark:
            self._menu_mark = mark
            app.invalidate()

    def _menu_hidden(self) -> str:
        """``↓ 12 more · ↑ 3 more`` for the open completion menu's entries out of view ("" when all show)."""
        from prompt_toolkit.layout.menus import CompletionsMenuControl

        session = self._session
        state = session.default_buffer.complete_state if session is not None else None
        if session is None or state is None or not state.completions:
            return ""
        for window in session.app.layout.find_all_windows():
            if isinstance(window.content, CompletionsMenuControl) and window.render_info is not None:
                info = window.render_info
                above = info.vertical_scroll
                below = len(state.completions) - above - info.window_height
                marks = [f"↓ {below} more" for _ in range(below > 0)] + [f"↑ {above} more" for _ in range(above > 0)]
                return " · ".join(marks)
        return ""

    def _toolbar(self) -> str:
        if self._session is not None and self._session.default_buffer.complete_state is not None:
            hidden = self._menu_mark
            return " " + " · ".join(part for part in (hidden, "↑↓ moves · Tab/Enter picks · Esc closes") if part)
        if self._failure is not None:
            return " agent exited"
        if not self._ready.is_set():
            return " starting the agent…"
        title = self.client.state.title
        if title is not None and len(title) > 40:
            title = title[:39] + "…"
        line = self.client.state.status_line()
        agent = self.client.agent_info
        name = str(agent.get("title") or agent.get("name") or "") if not line else ""
        return " " + sanitize(" · ".join(part for part in (name, line, title) if part), one_line=True)

    def _invalidate(self) -> None:
        if self._session is not None and self._session.app.is_running:
            self._session.app.invalidate()

    # -- local commands ---------------------------------------------------------------------------------------

    async def _local(self, command: LocalCommand) -> None:
        if command.name == "thoughts":
            transcript = self.transcript
            transcript.show_thoughts = not transcript.show_thoughts
            shown = transcript.show_thoughts
            self.console.print(Text(f"Thoughts are {'shown' if shown else 'collapsed'}.", style="dim"))
            if shown and transcript.thoughts:
                self.console.print(Text("\n".join(transcript.thoughts), style="dim italic"))
            return
        value = command.argument or await self._pick(command.name)
        if value is None:
            return
        try:
            await self.client.set_option(command.name, value)
        except RpcError as error:
            self.console.print(Text(f"Could not set the {command.name}: {sanitize(error.message)}", style="red"))
            return
        current = sanitize(str(self.client.state.current(command.name)), one_line=True)
        self.console.print(Text(f"{command.name}: {current}", style="dim"))

    async def _pick(self, category: str) -> str | None:
        from dsh.chat._picker import pick

        choices = self.client.state.choices(category)
        options = [
            (value, sanitize(label + (f"  ({description})" if description else ""), one_line=True))
            for value, label, description in choices
        ]
        picked = await pick(f"Pick the {category}:", options, default=self.client.state.current(category))
        self._typed = picked.typed
        return picked.value

    async def _next_mode(self) -> None:
        """Shift+Tab: the mode after the current one, round (the status line shows it)."""
        state = self.client.state
        values = [value for value, _, _ in state.choices("mode")]
        if not values:
            return
        current = state.current("mode")
        following = values[(values.index(current) + 1) % len(values)] if current in values else values[0]
        try:
            await self.client.set_option("mode", following)
        except (RpcError, ConnectionError):
            pass  # the status line keeps showing the mode the agent has
        self._invalidate()

    async def _resume(self) -> bool:
        """Pick a stored session and load it (its replay drawn like a turn), or start a new one when there is none;
        False when the agent cannot list and load sessions or the user backs out of the picker."""
        from dsh.chat._picker import pick

        client = self.client
        await client.initialize()
        if not client.can("loadSession") or not client.can("sessionCapabilities", "list"):
            self.console.print(Text("This agent cannot list and load sessions.", style="red"))
            return False
        sessions = await client.list_sessions()
        if not sessions:
            self.console.print(Text(f"No stored sessions for {client.cwd}; starting a new one.", style="yellow"))
            await client.new_session()
            self._ready.set()
            return True
        options = [(str(s["sessionId"]), _session_label(s)) for s in sessions]
        chosen = (await pick("Resume which session?", options, typing="refuse")).value
        if chosen is None:
            return False
        async with self.transcript.live_region(self._task_group):
            await client.load_session(chosen)
        if client.state.title is None:
            titles = {str(s["sessionId"]): s.get("title") for s in sessions}
            client.state.title = titles.get(chosen) if isinstance(titles.get(chosen), str) else None
        self.console.print(Text(f"Resumed {sanitize(client.state.title or chosen, one_line=True)}.", style="dim"))
        self._ready.set()
        return True

    # -- a turn -----------------------------------------------------------------------------------------------

    async def _turn(self, text: str) -> None:
        from prompt_toolkit.input import create_input

        client = self.client
        blocks = prompt_blocks(text, client.cwd, embed=client.can("promptCapabilities", "embeddedContext"))
        for block in blocks[1:]:
            self.console.print(Text(f"  attached {block.get('resource', block).get('uri')}", style="dim"))
        if self._shell_runs:
            blocks.insert(0, context_block(self._shell_runs))
            self.console.print(Text(f"  with the output of {_shell_names(self._shell_runs)}", style="dim"))
            self._shell_runs = []
        self.transcript.begin_turn()
        self._cancelling = False
        reason = "cancelled"
        keys = create_input()
        async with self.transcript.live_region(self._task_group):
            with anyio.CancelScope() as scope:
                self._turn_scope = scope
                with keys.raw_mode(), keys.attach(lambda: self._on_keys(keys)):
                    try:
                        reason = await client.prompt(blocks)
                    except RpcError as error:  # the turn failed (a missing key, say): say why, keep the session
                        reason = "end_turn"
                        self.transcript.end_segment()
                        self.console.print(Text(f"Error: {sanitize(describe(error))}", style="bold red"))
            self._turn_scope = None
        unsent = self.transcript.typing
        self.transcript.typing = None
        if self._failure is not None:
            raise self._failure
        if reason != "end_turn":
            self.console.print(Text(f"({sanitize(reason.replace('_', ' '), one_line=True)})", style="yellow"))
        kept = [*self._queued] if reason == "cancelled" else []
        if reason == "cancelled":  # a cancel stops what was queued too: it goes back on the prompt line, unsent
            self._queued = []
        if unsent:
            kept.append(unsent)
        if kept:
            self._typed = "\n".join([*kept, self._typed] if self._typed else kept)

    def _on_keys(self, keys: Any) -> None:
        # a lone Esc byte is held back as the start of a sequence until flushed: keys arrive whole in one read
        for press in [*keys.read_keys(), *keys.flush_keys()]:
            key = press.key.value if hasattr(press.key, "value") else str(press.key)
            if self._shell_scope is not None:  # a !command runs: these keys stop it, and only it
                if key in ("c-c", "escape", "c-d"):
                    self._shell_scope.cancel()
            elif key == "c-d" or (key == "c-c" and self._cancelling):
                self._leave()
            elif key in ("c-c", "escape"):
                self._cancel()
            elif self._answer is not None:  # a permission question: its keys answer it, nothing else is typed
                if key in self._answer[0]:
                    mapping, event, holder = self._answer
                    holder.append(mapping[key])
                    event.set()
            elif not self._cancelling:
                self._type(key, press.data)

    def _type(self, key: str, data: str) -> None:
        """A key during a turn: it edits the line shown above the status line; Enter steers the turn with it,
        Tab queues it as the next prompt."""
        transcript = self.transcript
        typed = transcript.typing or ""
        if key == "c-m":
            if typed.strip():
                transcript.typing = None
                self._task_group.start_soon(self._steer, typed.strip())
        elif key == "c-i":
            if typed.strip():
                transcript.typing = None
                self._queued.append(typed.strip())
                transcript.note(Text(f"  queued for after this turn: {typed.strip()}", style="dim"))
        elif key == "c-h":
            transcript.typing = typed[:-1] or None
        elif key == "c-u":
            transcript.typing = None
        elif len(data) == 1 and data.isprintable():
            transcript.typing = typed + data
        else:
            return
        transcript.refresh()

    async def _steer(self, text: str) -> None:
        """Send *text* to the running turn (``_dsh/session/steer``); an agent without it, or one whose turn just
        ended, gets it as the next prompt instead. A steer a cancel dropped comes back on the prompt line."""
        transcript = self.transcript
        if not self.client.steers():
            self._queued.append(text)
            transcript.note(Text(f"  queued for after this turn (the agent cannot be steered): {text}", style="dim"))
            return
        transcript.note(Text.assemble(("↳ ", "bold cyan"), (text, ""), ("  steering…", "dim")))
        try:
            result = await self.client.steer(prompt_blocks(text, self.client.cwd, embed=False))
        except RpcError as error:
            if isinstance(error.data, dict) and error.data.get("reason") == "idle":
                self._queued.append(text)  # the turn ended first: it is the next prompt
                self._invalidate()
                return
            transcript.note(Text(f"  could not steer: {sanitize(describe(error))}", style="red"))
            self._typed = text
            return
        except ConnectionError:
            return
        outcome = result.get("outcome")
        if outcome == "steered":
            transcript.note(Text("  (the agent has it)", style="dim"))
        elif outcome == "queued":
            transcript.note(Text("  (the turn had ended: it starts the next one)", style="dim"))
        elif outcome == "cancelled":
            transcript.note(Text("  (not delivered: back on the prompt line)", style="yellow"))
            self._typed = "\n".join(part for part in (self._typed, text) if part)

    def _leave(self) -> None:
        """End the turn now and the chat after it (the agent is stopped when the chat closes its connection)."""
        self._leaving = True
        if self._turn_scope is not None:
            self._turn_scope.cancel()

    def _cancel(self) -> None:
        if self._turn_scope is None:
            return
        if self._cancelling:
            if self._turn_scope is not None:
                self._turn_scope.cancel()  # a second Ctrl+C: stop waiting for the agent
            return
        self._cancelling = True
        self.transcript.cancelling = True
        self.transcript.refresh()
        self._task_group.start_soon(self._send_cancel, self._turn_scope)

    async def _send_cancel(self, turn: anyio.CancelScope | None) -> None:
        """``session/cancel``; if *turn* (the cancelled turn's scope, never a later turn's) is still waiting for
        the agent's answer after :data:`CANCEL_GRACE` seconds, stop waiting (a no-op once that turn ended)."""
        try:
            await self.client.cancel()
        except ConnectionError:
            return
        await anyio.sleep(CANCEL_GRACE)
        if turn is not None:
            turn.cancel()

    async def _shell(self, command: str) -> None:
        """``!command``: run it, show it, keep it for the next prompt; Ctrl+C or Esc stops it."""
        from prompt_toolkit.input import create_input

        from dsh.chat._secrets import command_environment

        cwd = self.client.cwd
        run = ShellRun(command, cwd)
        self.console.print(Text(f"! {command}", style="bold magenta"))
        keys = create_input()
        with anyio.CancelScope() as scope:
            self._shell_scope = scope  # Ctrl+C, Esc or Ctrl+D stop the command (never the chat: no agent to ask)
            try:
                with keys.raw_mode(), keys.attach(lambda: self._on_keys(keys)):
                    await run_shell(run, command_environment(self.options.config))
            except OSError as error:
                run.output = f"{error.strerror or error}\n"
            finally:
                self._shell_scope = None
        output = run.output.rstrip("\n")
        if output:
            self.console.print(Text(sanitize(output)), markup=False, highlight=False)  # a cat of a hostile file
        style = "dim" if run.exit_code == 0 else "yellow"
        self.console.print(Text(f"{run.ending()} · goes with your next message", style=style))
        self._shell_runs.append(run)

    async def ask_permission(self, tool_call: dict[str, Any], options: list[dict[str, Any]]) -> str | None:
        self.transcript.ask(clean(tool_call), options)  # the question itself: fixed labels (_render)
        mapping = permission_keys(options)
        event = anyio.Event()
        holder: list[str | None] = []
        self._answer = (mapping, event, holder)
        choice: str | None = None
        try:
            await event.wait()
            choice = holder[0]
        finally:
            self._answer = None
            name = next((option_label(o) for o in options if o.get("optionId") == choice), "cancelled")
            self.transcript.answered(name)
        return choice

    def on_terminal(self, terminal: Terminal) -> None:
        self.transcript.on_terminal(terminal)

    def on_update(self, update: dict[str, Any]) -> None:
        self.transcript.on_update(clean(update))  # agent data enters rendering here: every string sanitised
        self._invalidate()


def _ignore(signum: int, frame: object) -> None:
    return None


def _shell_names(runs: list[ShellRun]) -> str:
    return ", ".join(f"!{run.command}" for run in runs)


def _session_label(session: dict[str, Any]) -> str:
    title = session.get("title") if isinstance(session.get("title"), str) else None
    updated = str(session.get("updatedAt") or "")
    when = updated[:16].replace("T", " ") if updated else ""
    title = sanitize(title, one_line=True) if title else None
    return f"{title or '(untitled)'}  ·  {when}" if when else title or "(untitled)"
