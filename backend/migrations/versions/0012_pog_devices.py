"""each PoG round's devices as the round's verifier records them: NVML identity and CC attestation outcome

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-04 17:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0012'
down_revision = '0011'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('pog_devices',
                    sa.Column('round_id', sa.BigInteger(), nullable=False),
                    sa.Column('gpu_index', sa.Integer(), nullable=False),
                    sa.Column('verifier', sa.String(length=42), nullable=False),
                    sa.Column('name', sa.String(length=96), nullable=True),
                    sa.Column('uuid', sa.String(length=96), nullable=True),
                    sa.Column('memory_bytes', sa.BigInteger(), nullable=True),
                    sa.Column('serial', sa.String(length=30), nullable=True),
                    sa.Column('driver_version', sa.String(length=80), nullable=True),
                    sa.Column('cc_mode', sa.String(length=16), nullable=True),
                    sa.Column('attestation', sa.String(length=200), nullable=False),
                    sa.Column('reported_at', sa.DateTime(timezone=True), nullable=False),
                    sa.PrimaryKeyConstraint('round_id', 'gpu_index'))


def downgrade() -> None:
    op.drop_table('pog_devices')
