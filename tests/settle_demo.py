"""`make demo` on a smaller demo web, and every sensor of the code location ticked against what it leaves.

`python -m tests.settle_demo demo` runs orchestration.demo (every stage, the same topics file, the same run keys and
tags) on a 120-story web instead of 3,000: its end state has what the full demo's has (spidered topic, merged
stories and media, click figures, snapshots, weeks of clusters) in a fraction of the time.

`python -m tests.settle_demo ticks N` loads the code location as the code server does (its settings read from this
process's environment, as `make demo-ui` sets them) and evaluates each of its sensors N times in a row in the
instance under DAGSTER_HOME, each tick from the cursor the one before left (the first from none: a sensor just
started), and prints, as JSON, what each tick returned: run requests, backfills, partition requests, skip reason.
Nothing it returns is carried out: the daemon would do that.
"""

from __future__ import annotations

import functools
import json
import sys

#: the smaller web: large enough for several spider iterations, merged stories and media, small enough for 2 cores
SMALL_WEB = {"n_stories": 120, "n_media": 8}
#: the skip reason Dagster gives a tick whose sensor returned nothing and said nothing
EMPTY_RESULT = "Sensor function returned an empty result"


def run_demo() -> int:
    import topicmap.demo.web as demo_web
    from orchestration import demo

    demo_web.generate_demo_web = functools.partial(demo_web.generate_demo_web, **SMALL_WEB)
    return demo.main([])


def sensor_kind(sensor: object) -> str:
    """ "dagster" for the sensors whose evaluation is Dagster's own (run status, automation conditions), else "own"."""
    import dagster as dg

    own = not isinstance(sensor, dg.RunStatusSensorDefinition | dg.AutomationConditionSensorDefinition)
    return "own" if own else "dagster"


def tick_every_sensor(ticks: int) -> dict[str, dict]:
    import dagster as dg

    from orchestration.definitions import defs

    found: dict[str, dict] = {}
    repository = defs.get_repository_def()
    top_level = repository.get_top_level_resources()
    with dg.DagsterInstance.get() as instance:
        for sensor in sorted(repository.sensor_defs, key=lambda s: s.name):
            # as the code server builds them for a tick: the resources the sensor needs (transitively), no others
            needed, todo = set(), list(sensor.required_resource_keys)
            while todo:
                if (key := todo.pop()) not in needed:
                    needed.add(key)
                    todo.extend(top_level[key].required_resource_keys)
            resources = {key: resource for key, resource in top_level.items() if key in needed}
            cursor = None
            evaluated: list[dict] = []
            for _ in range(ticks):
                context = dg.build_sensor_context(
                    instance=instance,
                    cursor=cursor,
                    definitions=defs,
                    resources=resources,
                    sensor_name=sensor.name,
                )
                # as the code server evaluates a tick: partitions (the topics' dynamic ones) read from the instance
                with dg.partition_loading_context(dynamic_partitions_store=instance):
                    data = sensor.evaluate_tick(context)
                evaluated.append(
                    {
                        "run_requests": [
                            {
                                "run_key": r.run_key,
                                "job": r.job_name,
                                "partition": r.partition_key,
                                "backfill": r.asset_graph_subset is not None,
                            }
                            for r in data.run_requests or []
                        ],
                        "partition_requests": [repr(r) for r in data.dynamic_partitions_requests or []],
                        "skip_reason": data.skip_message,
                    }
                )
                cursor = data.cursor
            found[sensor.name] = {"kind": sensor_kind(sensor), "ticks": evaluated}
    return found


if __name__ == "__main__":
    if sys.argv[1:2] == ["demo"]:
        sys.exit(run_demo())
    print(json.dumps(tick_every_sensor(int(sys.argv[2]))))
