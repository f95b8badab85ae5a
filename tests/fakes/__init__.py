"""Stand-ins for services outside the project, such as the model provider."""
