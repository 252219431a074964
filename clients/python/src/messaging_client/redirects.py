"""The client's HTTP requests never follow a redirect (PROTOCOL 1.2, "Outbound requests").

urllib's default opener follows one, and sends the request's headers with
it, `Authorization` included, to whatever host `Location` names; for a POST
it follows with a GET, so the answer of a request that never ran looks like
success. Here a 3xx is what it is: an `HTTPError`, which the callers turn
into a failure.
"""

from __future__ import annotations

import urllib.request
from http.client import HTTPMessage
from typing import IO


class Redirected(Exception):
    """The server answered with a redirect, which the client does not follow."""

    def __init__(self, status: int, location: str | None) -> None:
        super().__init__(
            f"the server answered {status}, a redirect to {location!r}: not followed "
            "(is the server's URL right, https and all?)"
        )
        self.status = status
        self.location = location


class RefuseRedirects(urllib.request.HTTPRedirectHandler):
    """No redirect is followed: urllib raises the 3xx as an `HTTPError`."""

    def redirect_request(
        self, req: urllib.request.Request, fp: IO[bytes], code: int, msg: str, headers: HTTPMessage, newurl: str
    ) -> urllib.request.Request | None:
        return None


def opener(*handlers: urllib.request.BaseHandler) -> urllib.request.OpenerDirector:
    """An opener with `handlers` (cookies, say) that follows no redirect."""
    return urllib.request.build_opener(RefuseRedirects, *handlers)


not_following = opener()
