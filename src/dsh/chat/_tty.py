"""The terminal view: prompt_toolkit reads, rich draws, ACP underneath.

Between turns a prompt_toolkit prompt owns the terminal (line editing, multi-line input, ``/`` and ``@``
completion, the status line below it). During a turn a rich live region at the bottom of the screen shows what
is still changing (the last lines of the reply, running tool cards with their output, the plan, a permission
question, the status line) while everything settled is printed once into the scrollback above it; the
terminal is in raw mode so that keys reach the chat, not the screen: Ctrl+C cancels the turn, and ``y`` /
``a`` / ``n`` (or an option's number) answer a permission question.

Guarantees:

* The first prompt line appears before the agent has answered ``initialize``: start-up runs behind it, and a
  message typed early waits for the session. An agent that exits ends the chat (status 1, its stderr's tail).
* Ctrl+C during a turn sends ``session/cancel`` at once (a pending permission question is answered
  ``cancelled``); the prompt comes back when the agent answers the turn, or after :data:`CANCEL_GRACE`
  seconds if it does not (a second Ctrl+C stops waiting at once). Ctrl+C on an empty prompt twice in a row, or
  Ctrl+D, exits; Ctrl+C on a non-empty prompt clears it.
* Every permission request is shown with its card (the diff or the command) before the question, and is
  answered exactly once.
"""

from __future__ import annotations

import signal
import time
from typing import TYPE_CHECKING, Any

import anyio
from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.text import Text

from dsh.chat._commands import LocalCommand, parse_local
from dsh.chat._mentions import prompt_blocks
from dsh.chat._options import ChatOptions
from dsh.chat._render import permission_keys, permission_question, plan_view, tool_card
from dsh.chat._rpc import RpcError, describe
from dsh.chat._stream import MarkdownStream
from dsh.chat._terminals import Terminal

if TYPE_CHECKING:
    from prompt_toolkit import PromptSession

    from dsh.chat._client import AcpClient

__all__ = ["CANCEL_GRACE", "TtyView"]

CANCEL_GRACE = 3.0
FRAME = 0.08
PROMPT_MARK = "\u276f "  # HEAVY RIGHT-POINTING ANGLE QUOTATION MARK ORNAMENT: the prompt, and user turns in a replay
SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
FINAL = ("completed", "failed")
TEXT_UPDATES = {"agent_message_chunk": "message", "agent_thought_chunk": "thought", "user_message_chunk": "user"}


class TtyView:
    def __init__(self, options: ChatOptions) -> None:
        self.options = options
        self.console = Console(highlight=False)
        self.show_thoughts = False
        self._client: AcpClient | None = None
        self._session: PromptSession[str] | None = None
        self._ready = anyio.Event()
        self._failure: BaseException | None = None
        self._live: Live | None = None
        self._segment: MarkdownStream | None = None
        self._segment_kind: str | None = None
        self._message_id: Any = None
        self._calls: dict[str, dict[str, Any]] = {}
        self._terminal_text: dict[str, str] = {}
        self._plan_changed = False
        self._question: Text | None = None
        self._answer: tuple[dict[str, str], anyio.Event, list[str | None]] | None = None
        self._thoughts: list[str] = []
        self._asked: set[str] = set()
        """Tool calls whose card (with its diff) was printed with a permission question: not drawn again in the
        live region, and their final card leaves the diff out."""
        self._cancelling: float | None = None
        self._turn_scope: anyio.CancelScope | None = None
        self._task_group: Any = None

    @property
    def client(self) -> AcpClient:
        assert self._client is not None
        return self._client

    # -- the session ------------------------------------------------------------------------------------------

    async def run(self, client: AcpClient, resume: bool) -> int:
        self._client = client
        self._session = self._prompt_session()
        self.console.print(
            Text.assemble(
                ("dsh chat", "bold"),
                ("  Enter sends · Alt+Enter new line · / commands · @ files · Ctrl+D exits", "dim"),
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
            try:
                text = await self._session.prompt_async(pre_run=self._exit_if_failed)
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
            await self._session_ready()
            local = parse_local(text.strip(), self.client.state)
            if local is not None:
                if local.name == "quit":
                    return 0
                await self._local(local)
                continue
            await self._turn(text)

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

        style = Style.from_dict({"bottom-toolbar": "noreverse #888888", "prompt": "bold ansicyan"})
        return PromptSession(
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

    def _toolbar(self) -> str:
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
        return " " + " · ".join(part for part in (name, line, title) if part)

    def _invalidate(self) -> None:
        if self._session is not None and self._session.app.is_running:
            self._session.app.invalidate()

    # -- local commands ---------------------------------------------------------------------------------------

    async def _local(self, command: LocalCommand) -> None:
        if command.name == "thoughts":
            self.show_thoughts = not self.show_thoughts
            self.console.print(Text(f"Thoughts are {'shown' if self.show_thoughts else 'collapsed'}.", style="dim"))
            if self.show_thoughts and self._thoughts:
                self.console.print(Text("\n".join(self._thoughts), style="dim italic"))
            return
        value = command.argument or await self._pick(command.name)
        if value is None:
            return
        try:
            await self.client.set_option(command.name, value)
        except RpcError as error:
            self.console.print(Text(f"Could not set the {command.name}: {error.message}", style="red"))
            return
        self.console.print(Text(f"{command.name}: {self.client.state.current(command.name)}", style="dim"))

    async def _pick(self, category: str) -> str | None:
        from prompt_toolkit.shortcuts.choice_input import ChoiceInput

        choices = self.client.state.choices(category)
        options = [
            (value, label + (f"  ({description})" if description else "")) for value, label, description in choices
        ]
        picker = ChoiceInput(
            message=f"Pick the {category}:", options=options, default=self.client.state.current(category)
        )
        try:
            return await picker.prompt_async()
        except (KeyboardInterrupt, EOFError):
            return None

    async def _resume(self) -> bool:
        """Pick a stored session and load it (its replay drawn like a turn), or start a new one when there is none;
        False when the agent cannot list and load sessions or the user backs out of the picker."""
        from prompt_toolkit.shortcuts.choice_input import ChoiceInput

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
        try:
            chosen = await ChoiceInput(message="Resume which session?", options=options).prompt_async()
        except (KeyboardInterrupt, EOFError):
            return False
        async with self._live_region():
            await client.load_session(chosen)
        if client.state.title is None:
            titles = {str(s["sessionId"]): s.get("title") for s in sessions}
            client.state.title = titles.get(chosen) if isinstance(titles.get(chosen), str) else None
        self.console.print(Text(f"Resumed {client.state.title or chosen}.", style="dim"))
        self._ready.set()
        return True

    # -- a turn -----------------------------------------------------------------------------------------------

    async def _turn(self, text: str) -> None:
        from prompt_toolkit.input import create_input

        client = self.client
        blocks = prompt_blocks(text, client.cwd, embed=client.can("promptCapabilities", "embeddedContext"))
        for block in blocks[1:]:
            self.console.print(Text(f"  attached {block.get('resource', block).get('uri')}", style="dim"))
        self._thoughts = []
        self._asked.clear()
        self._cancelling = None
        reason = "cancelled"
        keys = create_input()
        async with self._live_region():
            with anyio.CancelScope() as scope:
                self._turn_scope = scope
                with keys.raw_mode(), keys.attach(lambda: self._on_keys(keys)):
                    try:
                        reason = await client.prompt(blocks)
                    except RpcError as error:  # the turn failed (a missing key, say): say why, keep the session
                        reason = "end_turn"
                        self._end_segment()
                        self.console.print(Text(f"Error: {describe(error)}", style="bold red"))
            self._turn_scope = None
        if self._failure is not None:
            raise self._failure
        if reason != "end_turn":
            self.console.print(Text(f"({reason.replace('_', ' ')})", style="yellow"))

    def _on_keys(self, keys: Any) -> None:
        for press in keys.read_keys():
            key = press.key if isinstance(press.key, str) else str(press.key)
            if key in ("c-c", "Keys.ControlC"):
                self._cancel()
            elif self._answer is not None and key in self._answer[0]:
                mapping, event, holder = self._answer
                holder.append(mapping[key])
                event.set()

    def _cancel(self) -> None:
        if self._cancelling is not None:
            if self._turn_scope is not None:
                self._turn_scope.cancel()  # a second Ctrl+C: stop waiting for the agent
            return
        self._cancelling = time.monotonic()
        self._refresh()
        self._task_group.start_soon(self._send_cancel)

    async def _send_cancel(self) -> None:
        try:
            await self.client.cancel()
        except ConnectionError:
            return
        await anyio.sleep(CANCEL_GRACE)
        if self._turn_scope is not None:  # the agent never answered the cancelled turn
            self._turn_scope.cancel()

    async def ask_permission(self, tool_call: dict[str, Any], options: list[dict[str, Any]]) -> str | None:
        self._end_segment()
        call_id = str(tool_call.get("toolCallId"))
        card = {**self._calls.get(call_id, {}), **tool_call}
        self.console.print(tool_card(card, self._terminal_text, show_output=False, cwd=self.client.cwd))
        self._asked.add(call_id)
        mapping = permission_keys(options)
        event = anyio.Event()
        holder: list[str | None] = []
        self._answer = (mapping, event, holder)
        self._question = permission_question(options)
        self._refresh()
        choice: str | None = None
        try:
            await event.wait()
            choice = holder[0]
        finally:
            self._answer = None
            self._question = None
            name = next((str(o.get("name")) for o in options if o.get("optionId") == choice), "cancelled")
            self.console.print(Text(f"  → {name}", style="dim"))
            self._refresh()
        return choice

    def on_terminal(self, terminal: Terminal) -> None:
        status = terminal.exit_status()
        end = ""
        if status is not None:
            how = f"signal {status['signal']}" if "signal" in status else f"exit code {status['exitCode']}"
            end = f"\n[{how}]"
        self._terminal_text[terminal.terminal_id] = terminal.text().rstrip("\n") + end

    # -- updates ----------------------------------------------------------------------------------------------

    def on_update(self, update: dict[str, Any]) -> None:
        kind = update.get("sessionUpdate")
        if kind in TEXT_UPDATES:
            self._text(TEXT_UPDATES[str(kind)], update)
        elif kind in ("tool_call", "tool_call_update"):
            self._tool(update)
        elif kind == "plan":
            self._plan_changed = True
        self._invalidate()

    def _text(self, kind: str, update: dict[str, Any]) -> None:
        content = update.get("content")
        if not isinstance(content, dict):
            return
        if content.get("type") == "text":
            text = str(content.get("text", ""))
        elif content.get("type") == "resource":
            raw = content.get("resource")
            resource: dict[str, Any] = raw if isinstance(raw, dict) else {}
            text = f"\n[attached {resource.get('uri')}]\n" if kind == "user" else ""
        elif content.get("type") == "resource_link":
            text = f"\n[linked {content.get('uri')}]\n" if kind == "user" else ""
        else:
            text = f"[{content.get('type')}]"
        message_id = update.get("messageId")
        new_message = kind == "user" and message_id is not None and message_id != self._message_id
        if self._segment is None or kind != self._segment_kind or new_message:
            self._end_segment()
            self._segment_kind = kind
            self._message_id = message_id
            if kind == "user":
                self._segment = MarkdownStream(self.console, style="bold cyan", markdown=False)
                self._segment.add(PROMPT_MARK)
            elif kind == "thought":
                self._segment = MarkdownStream(self.console, style="dim italic", markdown=False)
            else:
                self._segment = MarkdownStream(self.console)
        self._segment.add(text)
        if self._live is None:
            self._segment.commit()

    def _end_segment(self) -> None:
        segment, kind = self._segment, self._segment_kind
        self._segment = self._segment_kind = None
        if segment is None:
            return
        if kind == "thought":
            self._thoughts.append(segment.text)
            if not self.show_thoughts:
                words = len(segment.text.split())
                self.console.print(Text(f"✻ Thought ({words} words; /thoughts shows them)", style="dim italic"))
                return
        segment.finish()

    def _tool(self, update: dict[str, Any]) -> None:
        self._end_segment()
        call_id = str(update.get("toolCallId"))
        call = self._calls.setdefault(call_id, {})
        call.update({k: v for k, v in update.items() if k != "sessionUpdate" and v is not None})
        if call.get("status") in FINAL:
            self.console.print(self._card(call))
            del self._calls[call_id]

    def _card(self, call: dict[str, Any]) -> RenderableType:
        asked = str(call.get("toolCallId")) in self._asked
        return tool_card(call, self._terminal_text, show_diff=not asked, cwd=self.client.cwd)

    # -- the live region --------------------------------------------------------------------------------------

    def _live_region(self) -> _LiveRegion:
        return _LiveRegion(self)

    def _view(self) -> RenderableType:
        parts: list[RenderableType] = []
        if self._segment is not None:
            parts.append(self._segment.live())
        parts += [self._card(call) for call_id, call in self._calls.items() if call_id not in self._asked]
        if self._plan_changed and self.client.state.plan:
            parts.append(plan_view(self.client.state.plan))
        if self._question is not None:
            parts.append(self._question)
        frame = SPINNER[int(time.monotonic() / FRAME) % len(SPINNER)]
        if self._cancelling is not None:
            status = Text(f"{frame} cancelling…", style="yellow")
        else:
            status = Text(f"{frame} working · Ctrl+C cancels", style="dim")
        line = self.client.state.status_line()
        if line:
            status.append(f" · {line}", style="dim")
        parts.append(status)
        return Group(*parts)

    def _refresh(self) -> None:
        if self._live is None:
            return
        if self._segment is not None:
            self._segment.commit()
        self._live.refresh()


class _LiveRegion:
    """The live region for the length of a turn (or a load's replay): started, refreshed every frame, and on exit
    everything still in it printed for good (the rest of the reply, unfinished cards, a changed plan)."""

    def __init__(self, view: TtyView) -> None:
        self.view = view
        self._scope: anyio.CancelScope | None = None

    async def __aenter__(self) -> None:
        view = self.view
        view._plan_changed = False
        view._live = Live(console=view.console, auto_refresh=False, transient=True, get_renderable=view._view)
        view._live.start()
        self._scope = anyio.CancelScope()
        view._task_group.start_soon(self._frames, self._scope)

    async def _frames(self, scope: anyio.CancelScope) -> None:
        with scope:
            while True:
                self.view._refresh()
                await anyio.sleep(FRAME)  # a frame timer: the spinner moves even when nothing arrives

    async def __aexit__(self, *exc: object) -> None:
        view = self.view
        if self._scope is not None:
            self._scope.cancel()
        view._end_segment()
        for call in view._calls.values():
            view.console.print(view._card(call))
        view._calls.clear()
        if view._plan_changed and view.client.state.plan:
            view.console.print(plan_view(view.client.state.plan))
        assert view._live is not None
        view._live.stop()
        view._live = None


def _ignore(signum: int, frame: object) -> None:
    return None


def _session_label(session: dict[str, Any]) -> str:
    title = session.get("title") if isinstance(session.get("title"), str) else None
    updated = str(session.get("updatedAt") or "")
    when = updated[:16].replace("T", " ") if updated else ""
    return f"{title or '(untitled)'}  ·  {when}" if when else title or "(untitled)"
