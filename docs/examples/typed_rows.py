"""Dataset rows (one JSON object a line, as `data fetch` gives NeMo Gym's example.jsonl) as the
rows of NeMo Gym's typed rollout collection: `python typed_rows.py IN.jsonl OUT.jsonl`.

Each row becomes {"task_id": {"taskset": TASKSET, "task_id": "<the row's id>"}, "task_input":
{"responses_create_params": <the row's>, "task_data": <the rest of the row>}}.
"""

import json
import sys

TASKSET = "workplace_assistant_typed"  # the name environment_server_routes routes


def typed_row(row: dict) -> dict:
    """One dataset row as a typed row."""
    data = {key: value for key, value in row.items() if key != "responses_create_params"}
    return {
        "task_id": {"taskset": TASKSET, "task_id": str(row["id"])},
        "task_input": {
            "responses_create_params": row["responses_create_params"],
            "task_data": data,
        },
    }


if __name__ == "__main__":
    source, target = sys.argv[1:3]
    with open(source, encoding="utf-8") as rows, open(target, "w", encoding="utf-8") as out:
        for number, line in enumerate(rows, 1):
            if not line.strip():
                continue
            row = json.loads(line)
            if not isinstance(row, dict) or "responses_create_params" not in row or "id" not in row:
                sys.exit(
                    f"{source}:{number}: not a dataset row (an object with id and "
                    "responses_create_params, as in NeMo Gym's example.jsonl); tasks from "
                    "`workplace-env generate-tasks` have no model request to carry"
                )
            out.write(json.dumps(typed_row(row), ensure_ascii=False) + "\n")
