"""An agent whose send_email calls a person reviews first (LangChain's HumanInTheLoopMiddleware)."""

from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool


@tool
def send_email(to: str, subject: str) -> str:
    """Send an email."""
    return f"sent to {to}: {subject}"


class OneEmailModel(BaseChatModel):
    """Stands in for your model (init_chat_model("openai:gpt-4.1"), say): proposes one send_email
    call, then reports what the tool said."""

    @property
    def _llm_type(self) -> str:
        return "one-email"

    def bind_tools(self, tools, **kwargs):
        return self

    def _generate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:
        if messages[-1].type == "tool":
            reply = AIMessage(f"Done: {messages[-1].text}")
        else:
            call = {"name": "send_email", "args": {"to": "ada@example.com", "subject": "Launch"}, "id": "call-1"}
            reply = AIMessage("", tool_calls=[call])
        return ChatResult(generations=[ChatGeneration(message=reply)])


graph = create_agent(
    model=OneEmailModel(),
    tools=[send_email],
    middleware=[HumanInTheLoopMiddleware(interrupt_on={"send_email": True})],
)
