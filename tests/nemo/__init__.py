"""Black-box NeMo Gym (nemo-gym 0.7.0) test infrastructure.

NeMo Gym is a test client and the spec of its HTTP protocol here, never a source of code: these
helpers install it into its own Python 3.13 venv (:mod:`tests.nemo.venv`), and start its own
servers, agents and environment servers on loopback without Ray (:mod:`tests.nemo.servers`).
:mod:`tests.nemo.driver` is the one script run *inside* that venv (config resolution, the
stand-in model server, NeMo's conformance check, re-verification).
"""
