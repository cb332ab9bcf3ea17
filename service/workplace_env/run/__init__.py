"""``workplace-env run``: playing a JSONL file's episodes through a server and reporting them.

* :mod:`.command`: the command's work (reads the file, checks it, plays it, reports, exit status);
* :mod:`.options`: the options of ``--policy model``;
* :mod:`.scripted`: episodes of the scripted policies (``recorded``, ``oracle``, ``perturbed``)
  and their comparison with the recordings;
* :mod:`.model_policy`: ``--policy model``, the collection of a model's rollouts, resumable;
* :mod:`.plan`: what a resumed collection must match; :mod:`.rollout_files`: its output files;
* :mod:`.report`: the tables printed, a model run's figures by category, summary JSON and plot;
* :mod:`.sandbox_check`: which sandbox a run plays on, and lines written for another.

Server code never imports this package (``tests/project/test_import_graph.py``).
"""
