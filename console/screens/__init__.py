"""The console's dialogs and full screens."""
