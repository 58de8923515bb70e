#!/usr/bin/env python3
"""Checks a LeRobot dataset export with pyarrow: the layout of its version
(v3.0 or v2.1), the schema against meta/info.json's features, row counts
against the metadata, and index continuity (index 0..N-1 across the
dataset, frame_index 0..len-1 per episode, timestamp = frame_index / fps).

usage: check_lerobot.py DATASET_ROOT v3.0|v2.1     (exit 0 when valid)
"""

import json
import sys
from pathlib import Path

import pyarrow.parquet as pq


def fail(message):
    print(f"check_lerobot: {message}", file=sys.stderr)
    sys.exit(1)


def check_frames(table, info, episode_lengths):
    features = info["features"]
    for name, feature in features.items():
        if name not in table.column_names:
            fail(f"feature {name} has no column (columns: {table.column_names})")
        column = table.column(name)
        if feature["dtype"] == "image":
            first = column[0].as_py()
            if not first or not first.get("bytes", b"")[:2] == b"\xff\xd8":
                fail(f"{name} does not hold JPEG bytes")
        elif feature["dtype"] == "float32" and name != "timestamp":
            width = feature["shape"][0]
            if any(len(v) != width for v in column.to_pylist()):
                fail(f"{name} rows are not {width} wide")
    rows = table.to_pydict()
    fps = info["fps"]
    expected_index = 0
    position = 0
    for episode, length in episode_lengths:
        for frame in range(length):
            at = position + frame
            if rows["episode_index"][at] != episode:
                fail(f"row {at}: episode_index {rows['episode_index'][at]} != {episode}")
            if rows["frame_index"][at] != frame:
                fail(f"row {at}: frame_index {rows['frame_index'][at]} != {frame}")
            if abs(rows["timestamp"][at] - frame / fps) > 1e-4:
                fail(f"row {at}: timestamp {rows['timestamp'][at]} != {frame}/{fps}")
            if rows["index"][at] != expected_index:
                fail(f"row {at}: index {rows['index'][at]} != {expected_index}")
            expected_index += 1
        position += length
    return expected_index


def check_v30(root, info):
    episodes = pq.read_table(root / "meta/episodes/chunk-000/file-000.parquet").to_pydict()
    if len(episodes["episode_index"]) != info["total_episodes"]:
        fail("meta/episodes rows != total_episodes")
    lengths = list(zip(episodes["episode_index"], episodes["length"]))
    for i, (start, end, length) in enumerate(zip(episodes["dataset_from_index"], episodes["dataset_to_index"], episodes["length"])):
        if end - start != length:
            fail(f"episode {i}: dataset_to_index - dataset_from_index != length")
    tasks_table = pq.read_table(root / "meta/tasks.parquet")
    pandas_meta = json.loads(tasks_table.schema.metadata[b"pandas"])
    if pandas_meta["index_columns"] != ["task"]:
        fail("meta/tasks.parquet is not indexed by task")
    if tasks_table.num_rows != info["total_tasks"]:
        fail("meta/tasks.parquet rows != total_tasks")
    data = pq.read_table(root / "data/chunk-000/file-000.parquet")
    if data.num_rows != info["total_frames"]:
        fail(f"data rows {data.num_rows} != total_frames {info['total_frames']}")
    return check_frames(data, info, lengths)


def check_v21(root, info):
    episodes = [json.loads(line) for line in (root / "meta/episodes.jsonl").read_text().splitlines() if line]
    if len(episodes) != info["total_episodes"]:
        fail("meta/episodes.jsonl lines != total_episodes")
    stats = [line for line in (root / "meta/episodes_stats.jsonl").read_text().splitlines() if line]
    if len(stats) != len(episodes):
        fail("meta/episodes_stats.jsonl lines != episodes")
    tasks = [json.loads(line) for line in (root / "meta/tasks.jsonl").read_text().splitlines() if line]
    if len(tasks) != info["total_tasks"]:
        fail("meta/tasks.jsonl lines != total_tasks")
    total = 0
    offset = 0
    for episode in episodes:
        path = root / info["data_path"].format(episode_chunk=0, episode_index=episode["episode_index"])
        table = pq.read_table(path)
        if table.num_rows != episode["length"]:
            fail(f"{path.name}: {table.num_rows} rows != length {episode['length']}")
        index = table.column("index").to_pylist()
        if index[0] != offset:
            fail(f"{path.name}: index starts at {index[0]}, not {offset}")
        rebased = table.set_column(table.column_names.index("index"), "index", [[i - offset for i in index]])
        check_frames(rebased, info, [(episode["episode_index"], episode["length"])])
        offset += episode["length"]
        total += table.num_rows
    if total != info["total_frames"]:
        fail(f"frames {total} != total_frames {info['total_frames']}")
    return total


def main():
    if len(sys.argv) != 3 or sys.argv[2] not in ("v3.0", "v2.1"):
        fail(__doc__.strip().splitlines()[-1])
    root, version = Path(sys.argv[1]), sys.argv[2]
    info = json.loads((root / "meta/info.json").read_text())
    if info["codebase_version"] != version:
        fail(f"codebase_version {info['codebase_version']} != {version}")
    frames = check_v30(root, info) if version == "v3.0" else check_v21(root, info)
    print(f"check_lerobot: {root} is a valid LeRobot {version} dataset: {info['total_episodes']} episodes, {frames} frames")


if __name__ == "__main__":
    main()
