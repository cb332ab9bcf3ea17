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
        for line in rows:
            if line.strip():
                out.write(json.dumps(typed_row(json.loads(line)), ensure_ascii=False) + "\n")
