"""dispute reports

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-22 16:36:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0004'
down_revision = '0003'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('dispute_reports',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('verifier', sa.String(length=42), nullable=False),
    sa.Column('kind', sa.String(length=8), nullable=False),
    sa.Column('subject', sa.BigInteger(), nullable=False),
    sa.Column('challenge_id', sa.BigInteger(), nullable=True),
    sa.Column('decision', sa.String(length=32), nullable=False),
    sa.Column('indices', sa.JSON(), nullable=False),
    sa.Column('expected_digests', sa.JSON(), nullable=False),
    sa.Column('received_digests', sa.JSON(), nullable=False),
    sa.Column('tx_hashes', sa.JSON(), nullable=False),
    sa.Column('detail', sa.Text(), nullable=False),
    sa.Column('reported_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('dispute_reports', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_dispute_reports_challenge_id'), ['challenge_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_dispute_reports_subject'), ['subject'], unique=False)
        batch_op.create_index(batch_op.f('ix_dispute_reports_verifier'), ['verifier'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('dispute_reports', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_dispute_reports_verifier'))
        batch_op.drop_index(batch_op.f('ix_dispute_reports_subject'))
        batch_op.drop_index(batch_op.f('ix_dispute_reports_challenge_id'))

    op.drop_table('dispute_reports')
