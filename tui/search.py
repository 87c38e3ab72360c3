"""The / box: find a kernel or op by name. Enter finds (then steps to the next match), Shift+Enter steps back;
once something matches, the box closes and the keys go back to the lanes, where n / N step through the
matches and Esc ends the search (the screen's keys). The box only says what was asked (``Find``); the screen
searches."""

from __future__ import annotations

from textual.binding import Binding
from textual.css.query import NoMatches
from textual.message import Message
from textual.widgets import Input

from .keys import Key, Pane
from .navigate import show_event


class SearchInput(Input):
    """The search box (id "search"), mounted by the first /; shown while it has the class "-on"."""

    BINDINGS = [Binding("shift+enter", "screen.prev_match", "previous match", show=False)]

    def __init__(self) -> None:
        super().__init__(placeholder="find a kernel or op by name (Enter: find, then n / N: next / previous "
                                     "match, Esc: done)", id="search")

    def open(self, query: str) -> None:
        """Shown, with the focus, on ``query`` (the last search) unless something is typed already."""
        self.add_class("-on")
        if query and not self.value:
            self.value = query
        self.focus()

    def close(self) -> None:
        self.remove_class("-on")

    class Find(Message):
        """Enter in the box: find ``query`` (the same query again: the next match). The screen searches; when
        something matches it closes the box (``close``) and gives the keys back to the lanes."""

        def __init__(self, box: "SearchInput", query: str) -> None:
            super().__init__()
            self.box, self.query = box, query

    def on_input_submitted(self, ev: Input.Submitted) -> None:
        ev.stop()
        self.post_message(self.Find(self, ev.value))


class SearchKeys(Pane):
    """The search pane's actions (a part the explorer's screen holds, ``MainScreen``): / opens the box, its
    ``Find`` (handed over by the screen) is answered here (``find``), n / N (the gap keys, while something matches)
    and Shift+Enter step through the matches."""

    #: the search's key (``at``: its place in the help and the footer; n / N are the gap keys')
    KEYS = [
        Key("/", "find a kernel or op by name; Enter finds, then n / N step through the matches, Esc ends",
            (Binding("slash", "search", "find"),), at=120),
    ]

    async def action_search(self) -> None:
        inp = self.search_box()
        if inp is None:
            inp = SearchInput()
            await self.main.mount(inp, before=self.main.query_one("#status"))
        inp.open(self.scene.search.query if self.scene is not None else "")

    def search_box(self) -> SearchInput | None:
        """The search box, once mounted (the first /)."""
        try:
            return self.main.query_one("#search", SearchInput)
        except NoMatches:
            return None

    def find(self, ev: SearchInput.Find) -> None:
        sc = self.scene
        if sc is None:
            return
        if ev.query != sc.search.query:
            if sc.find(ev.query):
                self.show_match(sc.current_match())
        else:
            nxt = sc.step_match(1)
            if nxt >= 0:
                self.show_match(nxt)
        if sc.search.matches.size:
            # the box closes and the keys go back to the lanes: n / N step through the matches (the status
            # line says so), Esc ends the search; / opens the box again on the query
            ev.box.close()
            self.main.lanes.focus()
            self.main.update()
        else:
            self.main.update(keep_msg=True)

    def step_match(self, d: int) -> None:
        ev = self.scene.step_match(d)
        if ev >= 0:
            self.show_match(ev)
            self.main.update()

    def show_match(self, ev: int) -> None:
        show_event(self.scene, ev, self.main.lanes.cells_width())

    def action_prev_match(self) -> None:
        sc = self.scene
        if sc is not None and sc.search.matches.size:
            self.step_match(-1)
