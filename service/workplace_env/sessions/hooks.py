"""The store's hook point: named places in its code where an observer may step in.

Owns :class:`StoreHooks`, whose methods do nothing; a store calls them at the points below,
and a subclass installed as ``SessionStore.hooks`` (tests use
:class:`workplace_env.testing.faults.Faults`) can hold a thread there or make the next build,
release or response fail. Nothing on the network reaches it.

Points passed to :meth:`StoreHooks.hit` (with the session id, ``""`` for ``drain`` and
``sweep_wait``):

- ``"build"``: a seed is about to build tables (outside the store lock);
- ``"seed_wait"``: a seed or close is about to wait for a racing seed's build;
- ``"tool_wait"``: a tool call is about to take its session's lock;
- ``"tool"``: a tool is about to run (the session's lock held);
- ``"release_wait"``: a close is about to take its session's lock to release it;
- ``"sweep_wait"``: an idle eviction pass is about to take the sweep lock (``""``; no lock held);
- ``"verify"``: a verify is about to score (no lock held);
- ``"export"``: an export is about to snapshot a session (no lock held);
- ``"drain"``: the store has started refusing new seeds.

Kinds passed to :meth:`StoreHooks.take`, asked where the store can fail on its own:

- ``"build"``: a table build fails (the seed answers TABLES_UNAVAILABLE, S6);
- ``"release"``: releasing a session's tables fails (RELEASE_FAILED, C5);
- ``"response"``: a tool call ran and recorded its call_id, but its answer is lost
  (INJECTED_FAULT, UNAVAILABLE).
"""

from __future__ import annotations

#: The names :meth:`StoreHooks.hit` is called with.
POINTS = frozenset(
    {
        "build",
        "seed_wait",
        "tool_wait",
        "tool",
        "release_wait",
        "sweep_wait",
        "verify",
        "export",
        "drain",
    }
)
#: The names :meth:`StoreHooks.take` is called with.
KINDS = frozenset({"build", "release", "response"})


class StoreHooks:
    """No-op hooks: a store runs unobserved and never fails on purpose."""

    __slots__ = ()

    def hit(self, point: str, session_id: str) -> None:
        """The store reached ``point`` (one of :data:`POINTS`) for ``session_id``."""

    def take(self, kind: str) -> bool:
        """Whether the step ``kind`` (one of :data:`KINDS`) must fail this time."""
        return False


#: The hooks of a store nobody observes (stateless, so one instance serves every store).
NO_HOOKS = StoreHooks()
