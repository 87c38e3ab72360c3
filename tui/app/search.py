"""The / box: find a kernel or op by name. Enter finds (then steps to the next match), Shift+Enter steps back;
once something matches, the box closes and the keys go back to the lanes, where n / N step through the
matches and Esc ends the search (the screen's keys)."""

from __future__ import annotations

from textual.binding import Binding
from textual.widgets import Input


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

    def on_input_submitted(self, ev: Input.Submitted) -> None:
        screen = self.screen
        sc = screen.scene
        if sc is None:
            return
        if ev.value != sc.search_query:
            if sc.search(ev.value):
                screen.show_match(sc.current_match())
            else:
                screen.refresh_status()
        else:
            screen.step_match(1)
        if sc.matches.size:
            # the box closes and the keys go back to the lanes: n / N step through the matches (the status
            # line says so), Esc ends the search; / opens the box again on the query
            self.remove_class("-on")
            screen.lanes.focus()
            screen.refresh_bindings()
