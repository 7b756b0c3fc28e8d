"""Header names shared by the API and its clients (no imports: the Lambda functions read them without the
client side's httpx)."""

OPERATOR_HEADER = "x-dormant-operator-token"  # the operator token, where Authorization carries SigV4 or a JWT
