"""How `bench/run.py --profile` splits the worker's samples into the parts of a round
(bench/profiling.py, `worker_parts`), the table that sets a tool's round against the stack floor's."""

from bench.profiling import OTHER_PART, worker_parts

WORKER = 'process 1:"celery worker";Thread._bootstrap (threading.py:1002)'
TASK = f"{WORKER};apply_target (celery/concurrency/base.py:29);run_round (mcp_gateway/calls/runs.py:75)"


def parts_of(tmp_path, *stacks: tuple[str, int]) -> dict[str, float]:
    raw = tmp_path / "worker.raw"
    raw.write_text("".join(f"{stack} {count}\n" for stack, count in stacks))
    return {part: share for part, share in worker_parts(raw).items() if share}


def test_a_statement_made_inside_the_round_counts_for_the_statement_not_for_the_round(tmp_path):
    shares = parts_of(
        tmp_path,
        (
            f"{TASK};_paused (mcp_gateway/calls/runs.py:260);_record (mcp_gateway/calls/runs.py:455)"
            ";execute (psycopg/cursor.py:1)",
            3,
        ),
        (f"{TASK};run_leased (mcp_gateway/calls/runs.py:120);jsonable (mcp_gateway/calls/results.py:20)", 1),
    )
    assert shares == {
        "the round recorded, the cancel flag read under the call's lock": 75.0,
        "the rest of the round's bookkeeping (mcp_gateway/calls/runs.py)": 25.0,
    }


def test_a_node_run_on_the_tasks_own_thread_counts_for_the_graph_and_its_checkpoint_for_the_checkpoints(tmp_path):
    run = (
        f"{TASK};run_leased (mcp_gateway/calls/runs.py:120);run (graph_runtime/runner.py:160)"
        ";Pregel.stream (pregel/main.py:2)"
    )
    shares = parts_of(
        tmp_path,
        (f"{run};run_with_retry (pregel/_retry.py:40);choose (example_agents/region.py:9)", 1),
        (f"{run};PostgresSaver.put (postgres/__init__.py:300)", 2),
        (f"{run};PregelLoop.tick (pregel/_loop.py:500)", 1),
    )
    assert shares == {
        "the graph's nodes": 25.0,
        "checkpoints read and written, the lease fence with them": 50.0,
        "LangGraph's loop (runner.run's stream, the floor's invoke)": 25.0,
    }


def test_the_stack_floors_task_and_celerys_own_work_have_parts_of_their_own_and_an_unwound_stack_is_the_rest(tmp_path):
    shares = parts_of(
        tmp_path,
        (f"{WORKER};apply_target (celery/concurrency/base.py:29);floor_run (bench/tasks.py:50)", 1),
        (f"{WORKER};apply_target (celery/concurrency/base.py:29);trace_task (celery/app/trace.py:1)", 1),
        (f"{WORKER};asynloop (celery/worker/loops.py:80);on_readable (kombu/transport/redis.py:1)", 1),
        ('process 1:"celery worker";BasePipeline._communicate_gen (psycopg/_pipeline_base.py:1)', 1),
    )
    assert shares == {
        "the rest of the stack floor's task (bench/tasks.py)": 25.0,
        "Celery's task wrapper": 25.0,
        "Celery's consumer: messages taken and acknowledged": 25.0,
        OTHER_PART: 25.0,
    }
