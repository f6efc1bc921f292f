"""One module per `pstuts` command (or small family of commands); `cli/app.py` assembles them."""
