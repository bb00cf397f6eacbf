"""The renter's side: what runs in a renter's own process, with its own keystore.

- `client`: the HTTP client of the backend API (Sign-In with Ethereum, uploads, verified downloads);
- `wallet`: the renter's web3 connection and deployment, sending transactions it signs itself;
- `orders`: submit and fund a job, start, check and stop a lease, log in to a leased machine;
- `refunds` and `slash`: the renter's remedies, decided from the chain before anything is sent;
- `cli`: the Typer sub-apps `job_app`, `model_app` and `lease_app`.

The backend server never imports this package, and this package imports no service: it talks to
the backend over HTTP and to the chain through `client/`.
"""
