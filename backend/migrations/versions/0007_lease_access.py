"""leases carry the renter's signed SSH key and the provider's signed connection details

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-23 06:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0007'
down_revision = '0006'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('leases') as batch:
        batch.add_column(sa.Column('ssh_public_key', sa.Text(), nullable=True))
        batch.add_column(sa.Column('key_signature', sa.String(length=132), nullable=True))
        batch.add_column(sa.Column('access', sa.JSON(), nullable=True))
        batch.add_column(sa.Column('access_signature', sa.String(length=132), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('leases') as batch:
        for column in ('access_signature', 'access', 'key_signature', 'ssh_public_key'):
            batch.drop_column(column)
