"""The HTTP surface: the FastAPI app (`app.create_app`), its errors, the actor-key encoding, the OpenAPI
document, the inspector documents, and `client.HttpClient`, which speaks the same API from Python."""
