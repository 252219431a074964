from django.urls import path

from . import views

urlpatterns = [
    path("", views.chat, name="messaging-chat"),
    path("logout/", views.sign_out, name="messaging-logout"),
]
