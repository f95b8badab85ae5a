from django.urls import path

from mcp_gateway.wires.pages.views import answer_page

urlpatterns = [
    path("answer/<str:token>/", answer_page, name="answer_page"),
]
