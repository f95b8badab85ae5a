from django.urls import path

from mcp_gateway.wires.pages.views import answer_page, login

urlpatterns = [
    # Before the link's route: "login" is no link.
    path("answer/login/", login, name="answer_page_login"),
    path("answer/<str:token>/", answer_page, name="answer_page"),
]
