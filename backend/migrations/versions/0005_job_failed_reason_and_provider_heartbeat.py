"""job failure reason from JobFailed, provider heartbeat time

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-23 02:45:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0005'
down_revision = '0004'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.add_column(sa.Column('failure_reason', sa.Text(), nullable=True))
    with op.batch_alter_table('provider_profiles', schema=None) as batch_op:
        batch_op.add_column(sa.Column('last_seen_at', sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('provider_profiles', schema=None) as batch_op:
        batch_op.drop_column('last_seen_at')
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.drop_column('failure_reason')
