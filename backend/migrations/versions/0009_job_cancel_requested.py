"""jobs carry when a renter's requested cancel may refund (JobEscrow's two-step cancel)

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-23 12:40:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0009'
down_revision = '0008'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('jobs') as batch:
        batch.add_column(sa.Column('cancellable_at', sa.BigInteger(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('jobs') as batch:
        batch.drop_column('cancellable_at')
