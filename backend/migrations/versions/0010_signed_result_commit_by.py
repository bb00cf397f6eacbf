"""signed job results carry commitBy (the chain time by which the provider promised its commit)
and jobs record a slash with their signed result

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-28 17:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0010'
down_revision = '0009'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('jobs') as batch:
        batch.add_column(sa.Column('signed_commit_by', sa.BigInteger(), nullable=True))
        batch.add_column(sa.Column('result_slashed', sa.Boolean(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('jobs') as batch:
        batch.drop_column('result_slashed')
        batch.drop_column('signed_commit_by')
