from importlib.util import find_spec

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from . import views

urlpatterns = [
    path("", views.chat, name="chat"),
    path("login/", views.DemoLoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(next_page="login"), name="logout"),
    path("favicon.ico", views.favicon, name="favicon"),
    path("admin/", admin.site.urls),
    path("api/deuz/", include("deuz_django.api.urls")),
    # The pages links in notification mails open (Approve / Deny / Open a call), and
    # the approvals JSON the chat asks.
    path("deuz/", include("deuz_django.urls")),
]

if find_spec("a2a") is not None:  # the ``a2a`` extra: the demo agent's card at the root
    from deuz_django.protocols.a2a.views import card

    urlpatterns.append(
        path(".well-known/agent-card.json", card, {"agent": "assistant"})
    )
