"""Who may do what: ACEs, principals, console users and their credentials."""
