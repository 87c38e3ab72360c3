"""The explorer's screen: the header, the lanes over a time axis, the gap list and the stack panel of the
selected gap (the kernels and findings views behind 2 and 3), the status line and the keys. The App
(tui/app.py) loads the traces and hands the scenes over; this screen draws them and answers the keys.

What is on screen is one frozen value (``shown``, tui/shown.py) in a reactive attribute: a key changes the
scene and calls ``update``; ``watch_shown`` has the header, the lanes, the gap list, the stack panel, the status
line and the footer redrawn where the fields they depend on changed (tui/screendraw.py ``ScreenDraw``). The keys
are the panes' (lanekeys.py, gapkeys.py, search.py: the lanes, the gaps and the search; each pane's ``KEYS`` next
to its actions) and the screen's own (screenkeys.py ``SCREEN_KEYS``: views, tabs, before/after, detail, help,
export, Esc); the screen holds one object of each (tui/keys.py ``Pane``), binds their keys (``PANES``, one place)
and hands each bound action to the pane that has it; the help shows them in the same order. The widgets talk back
through messages (LanesView.Clicked and Zoom, GapList.Highlighted, SearchInput.Find, TableView.FindKernel,
ShowGaps and ShowKernels), answered here by the pane they are for."""

from __future__ import annotations

import os
from dataclasses import replace

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.css.query import NoMatches
from textual.reactive import reactive
from textual.screen import Screen
from textual.widgets import ContentSwitcher, DataTable, Footer, Static

from . import glyphs as G
from . import keys
from .gapkeys import GapKeys, opening_gap, opening_kernels
from .gaplist import NARROW, GapList
from .lanekeys import LaneKeys
from .panels import StackPanel
from .scene import Scene
from .screendraw import ScreenDraw
from .screenkeys import LANES_ONLY, SCREEN_KEYS, ScreenKeys
from .search import SearchInput, SearchKeys
from .shown import Shown
from .steady import PlainBox, PlainSwitcher, PlainVertical, SteadyHorizontal, SteadyVertical
from .tables import Fmt, TableView
from .timeline import Axis, LanesView


#: the panes whose keys the screen binds and whose actions it hands over (a new pane: its class here)
PANES = (LaneKeys, GapKeys, SearchKeys)
#: what the screen holds: the panes and its own keys (``ScreenKeys``), by the attribute it holds each in
HELD = {"lane_keys": LaneKeys, "gap_keys": GapKeys, "search_keys": SearchKeys, "screen_keys": ScreenKeys}
#: each bound action (``action_pan``) -> the attribute of the part that has it
ACTION_OWNER = {name: attr for attr, cls in HELD.items() for name in vars(cls) if name.startswith("action_")}


class MainScreen(PlainBox, Screen):
    #: every key of the screen, the panes' and its own, in the help's order (tui/keys.py)
    KEYS = keys.in_help_order(*(p.KEYS for p in PANES), SCREEN_KEYS)
    BINDINGS = keys.bindings(KEYS)
    KEY_HELP = keys.help_rows(KEYS)  # the help screen's key table (not HELP: Textual's help panel text)

    #: what is on screen (tui/shown.py); every change redraws what depends on it (``watch_shown``), and only
    #: that: a repaint of the whole screen on each change (Textual's default) made n and N twice as slow
    #: (bench_keys.py, 1M events: n median 41 -> 73 ms of CPU)
    shown: reactive[Shown] = reactive(Shown(), init=False, always_update=False, repaint=False)

    def __init__(self, glyphs: G.Glyphs) -> None:
        super().__init__()
        self.glyphs = glyphs
        self.fmt = Fmt(glyphs)
        self.data = 0  # counted up each time the app says the scene's analyses changed
        self._widgets: dict = {}  # ``widget``'s look-ups
        self.lane_keys = LaneKeys(self)
        self.gap_keys = GapKeys(self)
        self.search_keys = SearchKeys(self)
        self.screen_keys = ScreenKeys(self)
        self.painter = ScreenDraw(self)  # the redraws (``watch_shown``)

    def __getattr__(self, name: str):
        """A bound action the screen's own class does not have (``action_pan``): the method of the part that has
        it (``ACTION_OWNER``; Textual looks an action up on the screen its key is bound to)."""
        attr = ACTION_OWNER.get(name)
        held = self.__dict__.get(attr) if attr is not None else None
        if held is None:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        return getattr(held, name)

    # ================================================================ layout
    def compose(self) -> ComposeResult:
        yield Static(id="header")
        with PlainSwitcher(initial="lanesview", id="views"):
            with PlainVertical(id="lanesview"):
                with SteadyVertical(id="timeline"):
                    lv = LanesView(self.glyphs, id="lanes")
                    yield Axis(self.glyphs, lv, id="axis")
                    yield lv
                with SteadyHorizontal(id="bottom"):
                    yield GapList(id="gaplist")
                    yield StackPanel(id="stack", heading="stack")
            # the kernels and findings views (2, 3) and the search box (/) are mounted when first asked for:
            # their widgets and styles made the screen's construction ~25 ms longer on the way to the first frame
        yield Static(id="status")
        # the key bar is mounted once the first frame of the trace is drawn: Textual's Footer styles a widget per
        # key, which made the screen's construction ~0.1 s longer while the trace was being read
        yield Static(id="keybar")

    def on_mount(self) -> None:
        app = self.app
        if self.glyphs.ascii:
            self.add_class("-ascii")
        self.query_one(GapList).set_columns(self.size.width < NARROW)
        if app.scene is None and app.error is None:
            self.show_loading(app.loading or f"loading {os.path.basename(app.paths[0])} ... (Esc cancels)")
        self.lanes.focus()
        app.screen_mounted()

    @property
    def scene(self) -> Scene | None:
        return self.app.scene

    @property
    def lanes(self) -> LanesView:
        return self.widget("#lanes", LanesView)

    def widget(self, selector, expect=None):
        """``query_one(selector, expect)`` for the screen's own widgets (composed once, never replaced), kept
        after the first look-up: a key press looked up eight of them (a walk of the DOM each) per redraw."""
        key = (selector, expect)
        w = self._widgets.get(key)
        if w is None or w.parent is None:  # (removed: looked up again)
            w = self._widgets[key] = self.query_one(selector, expect) if expect is not None else \
                self.query_one(selector)
        return w

    @property
    def _status_msg(self) -> str:
        """The status line's message (tests read it)."""
        return self.shown.msg

    # ================================================================ what the app tells the screen
    def show_loading(self, msg: str) -> None:
        """The loading message in the header (before the first trace is shown)."""
        self.query_one("#header", Static).update(Text(self.fmt.text(msg), style="bold"))

    def mount_footer(self) -> None:
        try:
            slot = self.query_one("#keybar", Static)
        except NoMatches:
            return
        self.mount(Footer(), before=slot)
        slot.remove()

    def show_tab(self) -> None:
        """The app's current tab (``app.scene``) is the one to show; a tab opens on its top action's gap the first
        time (``opening_gap``), or on the kernels view for a kernel action (``opening_kernels``)."""
        sc = self.scene
        if not sc.visited and sc.gaps.order.size and sc.gaps.selected >= 0:
            sc.visited = True
            self.gap_keys.select_gap(opening_gap(sc))
            names = opening_kernels(sc, self.view_name())
            if names is not None:
                self.post_message(TableView.ShowKernels(names))
        self.update()

    def scene_changed(self, *, open_gap: bool = False) -> None:
        """The scene's analyses changed (one landed, failed, or its projection came): everything made from
        them is made again; ``open_gap``: the view goes to the gap a tab opens on."""
        self.data += 1
        sc = self.scene
        if open_gap and sc.gaps.selected >= 0:
            sc.visited = True
            self.gap_keys.select_gap(opening_gap(sc))
        names = opening_kernels(sc, self.view_name()) if open_gap else None
        if names is not None:
            self.post_message(TableView.ShowKernels(names))
        self.update()

    # ================================================================ state
    def update(self, msg: str = "", *, keep_msg: bool = False) -> None:
        """A new ``Shown`` from the scene as it is now (the status line's ``msg``: a move clears it)."""
        sc = self.scene
        if sc is None:
            if msg:
                self.shown = replace(self.shown, msg=msg)
            return
        app = self.app
        self.shown = Shown.of(sc, tabs=app.tab, data=self.data, view=self.view_name(),
                              msg=self.shown.msg if keep_msg else msg, diff=app.diff_pair() is not None)

    def refresh_view(self) -> None:
        """The scene was changed from outside a key (a click; tests): redraw what changed."""
        self.update()

    def say(self, msg: str) -> None:
        """A message on the status line (until the next move)."""
        self.update(msg)

    def watch_shown(self, old: Shown, new: Shown) -> None:
        if self.scene is not None:
            self.painter.shown_changed(old, new)

    def view_name(self) -> str:
        try:
            current = self.widget("#views", ContentSwitcher).current or "lanesview"
        except NoMatches:  # (not composed yet: the footer asks check_action early)
            return "lanes"
        return current[:-len("view")]

    def check_action(self, action: str, parameters: tuple) -> bool | None:
        """Whether a key acts now: True; False: it does not apply here (not in the footer, and the key does
        nothing: the lanes' keys in the kernels and findings views); None: it applies, not yet (greyed: no
        analysis yet, one trace for t)."""
        sc = self.scene
        view = self.view_name()
        if action in LANES_ONLY and view != "lanes":
            return False
        if action == "view":
            # the footer's entry (a second parameter): only in a table view, for another view
            return view != "lanes" and parameters[0] != view if len(parameters) > 1 else True
        if action == "open_row":
            return view == parameters[0] and isinstance(self.focused, DataTable)
        if action == "scroll_text":
            return self.screen_keys.scrolled() is not None
        if action in ("next_gap", "prev_gap", "focus_gap", "cause"):
            if sc is None:
                return None
            if action in ("next_gap", "prev_gap") and sc.search.stepping:
                return True
            if not sc.any_analysis or not sc.gaps.order.size:
                return None
            if action == "cause" and not sc.gaps.all_listed.size:
                return None
            return True
        if action == "next_trace":
            return True if self.app.tab[1] else None
        if action in ("origin", "link", "mark", "mark_range"):
            return True if sc is not None else None
        if action == "diff":
            return True if self.app.diff_pair() is not None else None
        if action in ("pan", "zoom", "fit", "cursor", "event", "expand", "search", "detail", "export"):
            if sc is None or (action == "export" and not sc.exportable):  # a preview, a pending list: never
                return None
            return True
        return True

    def on_resize(self, event) -> None:
        self.painter.resized()

    # ================================================================ the widgets' messages, to the part they are for
    @on(LanesView.Zoom)
    def _wheel_zoom(self, ev: LanesView.Zoom) -> None:
        """Ctrl or Shift and the wheel on the lanes."""
        self.lane_keys.action_zoom(ev.factor)

    @on(LanesView.Clicked)
    def _lanes_clicked(self, ev: LanesView.Clicked) -> None:
        """A click on the lanes moved its cursors."""
        self.update()

    @on(GapList.Highlighted, "#gaplist")
    def _gap_highlighted(self, ev: GapList.Highlighted) -> None:
        self.gap_keys.gap_highlighted(ev.key)

    @on(SearchInput.Find)
    def _search_find(self, ev: SearchInput.Find) -> None:
        self.search_keys.find(ev)

    @on(TableView.FindKernel)
    def _find_kernel(self, ev: TableView.FindKernel) -> None:
        self.screen_keys.find_kernel(ev.name)

    @on(TableView.ShowGaps)
    def _show_finding_gaps(self, ev: TableView.ShowGaps) -> None:
        self.screen_keys.show_finding_gaps(ev)

    @on(TableView.ShowKernels)
    async def _show_action_kernels(self, ev: TableView.ShowKernels) -> None:
        await self.screen_keys.show_action_kernels(ev.names)
