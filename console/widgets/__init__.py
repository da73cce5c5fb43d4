"""The console's widgets: the stream tree and one pane per tab."""
