from django.urls import path

from . import views

urlpatterns = [
    path("", views.chat, name="messaging-chat"),
    path("login/", views.guest_login, name="messaging-login"),
]
