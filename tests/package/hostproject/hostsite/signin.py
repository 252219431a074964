"""The host's own sign-in, as any project has one: here a form that makes an account
for a name (the app makes no accounts; it reads the session's user)."""

import uuid

from django.contrib.auth import get_user_model, login
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods


@require_http_methods(["GET", "POST"])
def sign_in(request):
    name = request.POST.get("name", "").strip()
    if request.method == "POST" and 0 < len(name) <= 32:
        user = get_user_model().objects.create_user(username=f"host-{uuid.uuid4().hex[:12]}", first_name=name)
        login(request, user, backend="django.contrib.auth.backends.ModelBackend")
        return redirect("/")
    return render(request, "signin.html")
