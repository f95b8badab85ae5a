"""How `bench/run.py --statements` turns two readings of pg_stat_statements into each statement's
cost per round of a load level (bench/profiling.py)."""

from bench.profiling import statement_costs


def reading(**statements: tuple[int, int, float, int]) -> dict[int, dict]:
    return {
        hash(query): {"query": query, "calls": calls, "rows": rows, "ms": ms, "blocks": blocks}
        for query, (calls, rows, ms, blocks) in statements.items()
    }


def test_a_statements_cost_per_round_is_what_its_counters_grew_by_divided_by_the_rounds():
    before = reading(lease=(10, 10, 2.0, 100))
    after = reading(lease=(30, 30, 6.0, 500))
    [lease] = statement_costs(before, after, rounds=10)
    assert lease == {"query": "lease", "calls": 2.0, "rows": 2.0, "ms": 0.4, "blocks": 40.0}


def test_a_statement_first_run_inside_the_window_counts_from_zero_and_the_costliest_comes_first():
    before = reading(lease=(10, 10, 2.0, 100))
    after = reading(lease=(20, 20, 3.0, 200), record=(5, 5, 4.0, 50))
    assert [s["query"] for s in statement_costs(before, after, rounds=5)] == ["record", "lease"]


def test_a_statement_not_run_inside_the_window_is_left_out():
    before = reading(lease=(10, 10, 2.0, 100), idle=(3, 3, 1.0, 9))
    after = reading(lease=(20, 20, 3.0, 200), idle=(3, 3, 1.0, 9))
    assert [s["query"] for s in statement_costs(before, after, rounds=5)] == ["lease"]
