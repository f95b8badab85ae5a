"""LangGraph's checkpointer creates and migrates its own tables (PostgresSaver.setup()).

Non-atomic: setup() runs CREATE INDEX CONCURRENTLY, which cannot run inside a transaction.
"""

from django.db import migrations


def setup_checkpointer(apps, schema_editor):
    from graph_runtime.checkpointer import setup_checkpointer

    setup_checkpointer(schema_editor.connection.alias)


class Migration(migrations.Migration):
    atomic = False

    dependencies = [("mcp_gateway", "0001_initial")]

    operations = [migrations.RunPython(setup_checkpointer, migrations.RunPython.noop, elidable=False)]
