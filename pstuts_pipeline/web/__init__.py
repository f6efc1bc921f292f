"""The learner's ask page and its JSON API (`pstuts serve`): FastAPI over the project's own search and answers."""
