"""The routes' FastAPI dependencies, as ``Annotated`` aliases:
``ServiceDep`` (the app's :class:`~faceweave.service.node.Service`) and
``CallerDep`` (the authenticated, rate-limited caller)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from faceweave.errors import AuthenticationError
from faceweave.service.auth import Caller, presented_credential
from faceweave.service.node import Service


def get_service(request: Request) -> Service:
    """The service of the app serving ``request`` (set by its lifespan handler)."""
    service: Service = request.app.state.service
    return service


ServiceDep = Annotated[Service, Depends(get_service)]


async def current_caller(request: Request, service: ServiceDep) -> Caller:
    """Authenticate the request and spend one token of the caller's rate limit.
    An address or credential with too many recent failed authentications is
    refused (429) before its credentials are looked at."""
    address = request.client.host if request.client else None
    presented = presented_credential(request.headers)
    service.auth_failures.check(address=address, credential=presented)
    try:
        caller = service.auth.identify(request.headers)
    except AuthenticationError:
        if presented is not None:  # no credential at all guesses nothing
            service.auth_failures.failed(address=address, credential=presented)
        raise
    service.limiter.take(caller.owner)
    return caller


CallerDep = Annotated[Caller, Depends(current_caller)]
