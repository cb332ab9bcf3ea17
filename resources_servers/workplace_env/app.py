"""NeMo Gym entrypoint of the workplace-env resources server: becomes ``workplace-env serve``.

NeMo Gym's launcher runs this file in the venv it built from ``requirements.txt``; see
:mod:`workplace_env.nemo_entry` for the config it reads.
"""

from workplace_env.nemo_entry import main

if __name__ == "__main__":
    main()
