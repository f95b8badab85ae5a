"""Chat models for the example agents: OpenAI when configured, a scripted fake otherwise."""

import os
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, convert_to_openai_messages
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.utils.function_calling import convert_to_openai_tool

from example_agents import scripts


def chat_model(script_name: str) -> BaseChatModel:
    """The model for one run; `script_name` names the scripted fallback's script."""
    # Read the environment on every call, not at import: graphs are imported once
    # per process, while tests and deployments choose the model per run.
    if os.environ.get("OPENAI_API_KEY"):
        from langchain_openai import ChatOpenAI  # imported lazily: only needed with a key

        return ChatOpenAI(
            model=os.environ.get("OPENAI_MODEL", "gpt-4o-mini"),
            base_url=os.environ.get("OPENAI_BASE_URL") or None,
            temperature=0,
        )
    return ScriptedChatModel(script_name=script_name)


def to_openai_dicts(messages: list[BaseMessage]) -> list[dict[str, Any]]:
    """LangChain messages in the chat-completions shape the fake OpenAI server receives."""
    return convert_to_openai_messages(messages)


class ScriptedChatModel(BaseChatModel):
    """Answers with `scripts.next_turn`, like the fake OpenAI server does."""

    script_name: str

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Any, *, tool_choice: Any = None, **kwargs: Any) -> Any:
        # Bind the tools in OpenAI form, as ChatOpenAI sends them.
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        names = scripts.tool_names(kwargs.get("tools", []))
        turn = scripts.next_turn(to_openai_dicts(messages), names)
        reply = AIMessage(
            content=turn["content"],
            tool_calls=[{"type": "tool_call", **call} for call in turn["tool_calls"]],
        )
        return ChatResult(generations=[ChatGeneration(message=reply)])


class DeferredChatModel(BaseChatModel):
    """Stands in for `chat_model(script_name)` and picks the real model at call time.

    `create_agent` needs a model object when the graph is built (at import), but it
    calls `bind_tools` on every model turn, which is where this one makes its choice.
    """

    script_name: str

    @property
    def _llm_type(self) -> str:
        return "deferred"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return chat_model(self.script_name).bind_tools(tools, **kwargs)

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        reply = chat_model(self.script_name).invoke(messages, stop=stop, **kwargs)
        return ChatResult(generations=[ChatGeneration(message=reply)])
