"""Test support shipped with the server: never imported by the server's own code.

- :mod:`.faults`: :class:`~.faults.Faults`, fault injection and sync points for a
  :class:`~workplace_env.sessions.SessionStore`.
"""
