"""Shared pytest configuration (asyncio mode is `auto`, see pyproject.toml)."""
