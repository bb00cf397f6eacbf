"""job failures and provider mining reports

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22 15:30:19.866898
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0002'
down_revision = '0001'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('job_failures',
    sa.Column('job_id', sa.BigInteger(), nullable=False),
    sa.Column('kind', sa.String(length=64), nullable=False),
    sa.Column('error', sa.Text(), nullable=False),
    sa.Column('reported_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('job_id')
    )
    with op.batch_alter_table('provider_profiles', schema=None) as batch_op:
        batch_op.add_column(sa.Column('miner', sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column('hashrate', sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('provider_profiles', schema=None) as batch_op:
        batch_op.drop_column('hashrate')
        batch_op.drop_column('miner')

    op.drop_table('job_failures')
