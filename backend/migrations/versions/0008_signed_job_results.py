"""jobs carry the provider-signed result delivered before the batched commit

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-23 09:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0008'
down_revision = '0007'
branch_labels = None
depends_on = None

COLUMNS = ('signed_output_root', 'signed_item_count', 'signed_result_digest', 'result_signature',
           'result_available_at', 'commit_matches_signed')


def upgrade() -> None:
    with op.batch_alter_table('jobs') as batch:
        batch.add_column(sa.Column('signed_output_root', sa.String(length=66), nullable=True))
        batch.add_column(sa.Column('signed_item_count', sa.BigInteger(), nullable=True))
        batch.add_column(sa.Column('signed_result_digest', sa.String(length=66), nullable=True))
        batch.add_column(sa.Column('result_signature', sa.String(length=132), nullable=True))
        batch.add_column(sa.Column('result_available_at', sa.DateTime(timezone=True), nullable=True))
        batch.add_column(sa.Column('commit_matches_signed', sa.Boolean(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('jobs') as batch:
        for column in reversed(COLUMNS):
            batch.drop_column(column)
