"""Who sent a message or called an action: the caller's identity as history records it.

Pure data. The HTTP API reads it from API Gateway's request context (an IAM principal or JWT claims), the
local stack gives a dev identity, and an actor calling another actor is a caller of kind "actor". The engine
records a message's sender with the message, so a replay sees the same value.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

CallerKind = Literal["iam", "jwt", "dev", "anonymous", "actor"]


class Caller(BaseModel):
    """An authenticated (or, with auth mode `none`, anonymous) caller.

    - `kind`: `iam` (SigV4: an AWS principal), `jwt` (a bearer token API Gateway verified), `dev` (the local
      stack), `anonymous` (auth mode `none`), `actor` (another actor, from a step or action).
    - `id`: the principal's ARN (iam), the token's `sub` (jwt), the dev user, `anonymous`, or the calling
      actor's storage id (`name/key...`).
    - `claims`: the JWT's claims as API Gateway passes them (strings), or the IAM principal's fields
      (`accountId`, `userArn`, `userId`, `callerId`, `principalOrgId`), or the calling actor's `name` and `key`.
    - `scopes`: the JWT's scopes (`scope` / `scp` claims).
    """

    model_config = ConfigDict(frozen=True)

    kind: CallerKind
    id: str
    claims: dict[str, Any] = Field(default_factory=dict)
    scopes: tuple[str, ...] = ()

    def has_scope(self, scope: str) -> bool:
        return scope in self.scopes

    def claim(self, name: str, default: Any = None) -> Any:
        return self.claims.get(name, default)

    def __str__(self) -> str:
        return f"{self.kind}:{self.id}"
