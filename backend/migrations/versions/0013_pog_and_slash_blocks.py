"""the block of each provider's last PoG record and of each account's latest slash: a provider
slashed since its last passed round is not available (protocol.availability)

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-04 20:45:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0013'
down_revision = '0012'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('providers') as batch:
        batch.add_column(sa.Column('pog_block', sa.BigInteger(), nullable=True))
    with op.batch_alter_table('stakes') as batch:
        batch.add_column(sa.Column('slashed_block', sa.BigInteger(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('stakes') as batch:
        batch.drop_column('slashed_block')
    with op.batch_alter_table('providers') as batch:
        batch.drop_column('pog_block')
