"""A graph tested on its own, with LangGraph alone: run it to its interrupt, then resume it."""

from booking import graph
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command


def test_the_booking_asks_whose_name_and_books_under_the_answer():
    tested = graph.copy(update={"checkpointer": InMemorySaver()})  # the service binds its own
    config = {"configurable": {"thread_id": "1"}}

    tested.invoke({"party_size": 2}, config)
    (asked,) = tested.get_state(config).interrupts
    assert asked.value == "Whose name is the booking under?"

    result = tested.invoke(Command(resume={asked.id: "Ada"}), config)
    assert result["booking"] == "A table for 2, under Ada"
